"""Real loopback servers for tests and benchmarks: emulated search APIs and a website of pages."""
