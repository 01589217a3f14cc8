"""The per-agent alive mask: which agents of each env act, observe and collide.

A scenario that lets agents leave (per-agent termination) or draws a per-env agent count at reset
(``WorldSpec.alive_mask``) gets one ``[E, A]`` bool array on the device, ``World.alive``: an agent
whose entry is false is frozen (not integrated, its action ignored), absent from every neighbor
list (nothing collides with it, no one observes it) and observes zeros with a zero reward. Every
kernel that reads it is a variant compiled for it (its factory's ``masked`` key, ``with_alive``'s
struct): without the mask no array is allocated, no argument passed and no instruction changed.
"""

import functools

import warp as wp

#: The Warp type of the mask: [E, A] bool, true where the agent acts.
ALIVE_ARRAY = wp.array2d(dtype=wp.bool)


def extend_struct(struct, name: str, fields: dict):
    """A new Warp struct ``name``: the fields of the Warp struct ``struct``, then ``fields`` (name ->
    Warp type). The argument struct of a kernel's masked variant; the unmasked one keeps ``struct``."""
    annotations = {**struct.cls.__annotations__, **fields}
    namespace = {"__annotations__": annotations, "__module__": struct.cls.__module__, "__qualname__": name}
    return wp.struct(type(name, (), namespace))


@functools.cache
def with_alive(struct):
    """``struct`` with one more field, ``alive`` (``ALIVE_ARRAY``)."""
    return extend_struct(struct, f"{struct.cls.__name__}Alive", {"alive": ALIVE_ARRAY})
