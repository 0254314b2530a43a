"""Loading models, weights, corpora, provenance and model inputs; imports no other empirical sub-package."""
