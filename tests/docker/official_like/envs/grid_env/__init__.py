"""A grid world in the older layout of OpenEnv's ``envs/grid_world_env``."""
