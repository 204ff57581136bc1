"""Small numerical learners the protocols use, kept out of the protocol package: particle swarm
optimisation (``pso``) and the trained router's question -> member-score models (``router_model``).
Pure numpy; they know nothing of protocols, tasks or backends."""
