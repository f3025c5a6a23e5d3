"""What a build or a publish left, read back: the checks `opgen audit` and `opgen profile` run on it."""
