"""The only code that talks to Redis: connections, fault classification, scripts."""
