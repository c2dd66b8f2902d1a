"""Recipes: accelerate-launchable training scripts with their YAML configs."""
