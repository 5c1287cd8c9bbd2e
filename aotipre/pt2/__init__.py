"""Reading .pt2 archives with zipfile and json only: layout, PackageInfo, contract parsing."""
