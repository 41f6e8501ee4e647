"""Rebuilding the demo-known adapter and its membership manifest (`mia demo build`); not needed at run time."""
