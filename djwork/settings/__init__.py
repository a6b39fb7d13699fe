"""settings.DJWORK: one table of setting specs, their kinds and checks, the typed Config (docs/settings.md)."""
