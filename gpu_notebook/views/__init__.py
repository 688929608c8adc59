"""Views: render a Report (text, widgets, HTML); they never compute figures.

``insert_widget.InsertFixWidget`` offers one fix as a new code cell below the profiled cell
("Insert fix"), with a copy / ``%load`` fallback where no gpu-notebook labextension answers.
"""
