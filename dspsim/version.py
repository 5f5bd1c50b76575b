"""The release, in one place (the package, manifests and saved runs read it)."""

__version__ = "0.2.0"
