"""The data plane: plan bounded offset ranges, copy them, record progress and offset-syncs."""
