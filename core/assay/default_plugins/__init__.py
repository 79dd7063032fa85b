"""Built-in plugins, registered through the same hooks as third-party ones (see DEFAULT_PLUGINS)."""
