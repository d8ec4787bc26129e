"""paperlake: raw dumps of paper abstracts into a versioned DuckLake warehouse."""
