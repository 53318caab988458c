"""The results: the Report every verb and view reads (`report`) and the table of views, each
view's name, renderer and the analyses it needs (`view_table`)."""
