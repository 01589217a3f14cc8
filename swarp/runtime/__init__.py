"""The step machinery every layer above shares: how launches run (eagerly, recorded and replayed,
or captured in a graph), the execution plan that decides every launch and layout, episode
bookkeeping, device-side env lists and observation rows. Imports only ``swarp.core``."""
