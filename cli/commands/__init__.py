"""One module per command; each parses its options, makes one library call and renders."""
