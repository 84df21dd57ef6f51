"""Test suite for cogworker_async."""
