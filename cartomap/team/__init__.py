"""Team mode: who a person is and what their role lets them do, for the dashboard and the CLI alike.

``roles``: the team file (``team.toml`` in the run store, or ``CARTOMAP_TEAM``), its roles (owner,
annotator, viewer), the actions that write (one registry), and the one check every shell asks
(:func:`cartomap.team.roles.refusal`). ``access``: how the dashboard learns who a request is (a local
user, an authenticating proxy's user header honoured only from the proxy's address, or Streamlit's
OpenID Connect login) and when it refuses to listen beyond this machine. Pure: no Streamlit here.
"""
