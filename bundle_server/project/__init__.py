"""The project loop: builds, epochs, development installs, project events and their routes;
the `project` and `project_events` rows of `_services.SERVICES` mount them."""
