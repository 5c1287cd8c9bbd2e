"""Reading .pt2 archives with zipfile and json only: layout, PackageInfo, contract parsing.

Beside the reader: dtypes.py (the dtype numberings an archive and an AOTI log use, torch-free) and
bundle.py (`aotipre bundle`, the one module that writes a .pt2).
"""
