"""The exception every error of the homogeneity package derives from."""


class HomogeneityError(Exception):
    """A model, graph or degree the homogeneity analysis cannot handle.

    Messages say what was expected, what arrived, and where (node, op, module path).
    """
