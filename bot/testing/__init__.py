"""Test doubles that ship with alignbot, for its own tests and for testing a deployment."""
