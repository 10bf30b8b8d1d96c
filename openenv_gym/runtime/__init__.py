"""Server runtime: hosts one environment class over OpenEnv JSON /ws and the batched protocol."""
