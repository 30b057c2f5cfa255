from .cesga import admin as cesga_admin  # noqa: F401  (registers CesgaRegistration)
