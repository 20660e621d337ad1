"""Configurations: a dict of flags (the command line's names, without the dashes) turned
into the library's sb_config, and back."""

import ctypes
import json

from . import _check, _lib
from ._lib import lib, check


def flag_text(value):
    """A flag's value as the command line spells it: True/False for booleans."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "none"
    return str(value)


class Config(_lib.Handle):
    """An owned sb_config built from flags; use as a context manager or call close()."""

    free = "sb_config_free"

    def __init__(self, flags=None, handle=None):
        err = _lib.Error()
        if handle is None:
            handle = ctypes.c_void_p()
            check(lib.sb_config_create(ctypes.byref(handle), ctypes.byref(err)), err)
            handle = handle.value
        self.handle = handle
        try:
            for key, value in (flags or {}).items():
                check(lib.sb_config_set_key(self.handle, _check.text("flag name", key),
                                            _check.text(key, flag_text(value)),
                                            ctypes.byref(err)), err)
        except Exception:
            self.close()
            raise

    @classmethod
    def from_checkpoint(cls, path, flags=None):
        err = _lib.Error()
        handle = ctypes.c_void_p()
        check(lib.sb_checkpoint_config(
            str(path).encode(), ctypes.byref(handle), ctypes.byref(err)), err)
        return cls(flags, handle=handle.value)

    def to_dict(self, training_only=False):
        err = _lib.Error()
        out = ctypes.c_void_p()
        check(lib.sb_config_to_json(self.handle, 1 if training_only else 0, ctypes.byref(out),
                                    ctypes.byref(err)), err)
        return json.loads(_lib.take_string(out.value))

    def run_hash(self):
        buf = ctypes.create_string_buffer(17)
        lib.sb_config_run_hash(self.handle, buf)
        return buf.value.decode()



def defaults():
    """Every key with its default, as the command line's --help gives them: {name: text}."""
    return {lib.sb_config_key_name(i).decode(): lib.sb_config_key_default(i).decode()
            for i in range(lib.sb_config_key_count())}
