"""After the capture: manifests found, traces collected, read as a stream, summarised and compared.

- :mod:`.captures`: the captures under a folder, from their manifests; :mod:`.places`: where to look when no folder
  is named (this project's captures first); :mod:`.collect`, :mod:`.layout`,
  :mod:`.journal` (DEST, opened once) and :mod:`.inside` (a capture's files, read inside its folder):
  ``patchkit collect``.
- :mod:`.files`, :mod:`.read`, :mod:`.jsonstream`, :mod:`.selftime`: torch and torch_npu traces, read without
  loading them whole.
- :mod:`.summary`, :mod:`.compare`, :mod:`.plot`, :mod:`.analyse` (msprof-analyze).
"""
