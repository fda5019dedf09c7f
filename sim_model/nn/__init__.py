"""Neural-network modules of the world model."""
