# Prints what the demo runs on.
"$ASTRAL_BIN" --version
uname -srm
