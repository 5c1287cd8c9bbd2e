"""What a package's compiled members need from the host, read from the binaries without loading
them: ELF shared objects (aotipre.binaries.elf), x86 instruction features (x86), CUDA cubins and
fatbins (cuda), the facts gathered per model (facts), the producing-torch table (versions)."""
