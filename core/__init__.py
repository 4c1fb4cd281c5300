"""prepflow's core layer: what every other package may import and which imports none of them
(errors today; the config schema and hashing belong here too). See the layers in .importlinter."""
