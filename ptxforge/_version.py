"""The ptxforge version, written into the header of every PTX module it renders."""

__version__ = "0.1.0"
