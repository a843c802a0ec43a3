// stop route
