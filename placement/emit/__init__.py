"""Launch configs that realize a plan in a framework, each file saying what it realizes and what it cannot."""
