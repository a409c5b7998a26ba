"""Sum, Mean, Max and Min over any number of broadcast inputs."""
