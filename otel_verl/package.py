"""The library versions this instrumentation was tested against (contrib convention)."""

_instruments = ("verl == 0.9.1",)
