#pragma once
// The emulator's stand-in: gen.py turns launch_chained calls into emu::launch.
