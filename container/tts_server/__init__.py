"""The Kokoro-82M serving container: engine (no HTTP) and the aiohttp server around it."""
