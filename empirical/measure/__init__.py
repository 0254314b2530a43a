"""Scaling θ, similarity, the limit, components, the head atlas, their plots; imports empirical.models."""
