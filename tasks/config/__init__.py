"""The config: its schema (a superset of Ludwig's preprocessing config), loading and Ludwig's forms, the plugins it names."""
