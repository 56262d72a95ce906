"""Registry entries of each paper's estimators and algorithms, one module per paper."""
