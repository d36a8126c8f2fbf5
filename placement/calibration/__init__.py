"""Published runs the cost model is checked against (`placement validate`)."""
