"""The project loop: builds, epochs, development installs, project events and their routes."""
