"""The panes of the app; each shows data it is given and posts what the user asks for."""
