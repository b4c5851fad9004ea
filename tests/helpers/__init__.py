"""Helpers the tests import (``from helpers.tiny_models import tiny_pair``); pytest fixtures stay in conftest.py."""
