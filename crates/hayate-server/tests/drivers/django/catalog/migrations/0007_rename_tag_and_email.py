# Written by hand as `makemigrations` writes it after renaming Tag to Label and
# Author.email to contact (makemigrations --check in check.py asserts the models agree).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0006_publisher_name_not_unique'),
    ]

    operations = [
        migrations.RenameModel(
            old_name='Tag',
            new_name='Label',
        ),
        migrations.RenameField(
            model_name='author',
            old_name='email',
            new_name='contact',
        ),
    ]
