"""A TextArena-style environment in the shape of OpenEnv's ``envs/textarena_env``."""
