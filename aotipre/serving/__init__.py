"""The model server's side of a deployment: Triton's config.pbtxt read, checked and written."""
