"""Built-in targets of kgate's driver protocol (kgate.driver)."""
