"""Sample inputs: safe loading of .pt files and their torch-free description."""
