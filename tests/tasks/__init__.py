"""Tasks that exist for the tests only, each in its own folder, registered by the test that uses it."""
