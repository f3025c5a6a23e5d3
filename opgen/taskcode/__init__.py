"""Reading task source: AST helpers and the operator calls of a task."""
